//! `docs/ADDING_A_LAYER.md` shows the registration line of its worked example as text (the
//! `architectures!` list is the crate's own): it must be the source's, line for line. (The
//! doc's Rust blocks are compiled and run as doctests, `docs::AddingALayer`.)

#[test]
fn the_registration_line_in_the_doc_is_the_source_s() {
    let doc = include_str!("../docs/ADDING_A_LAYER.md");
    let src = include_str!("../src/nn/arch/mod.rs");
    let start = doc
        .find("## 3. One registration line")
        .expect("the doc has its section 3");
    let block = doc[start..]
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("section 3 shows the line in a text block");
    let lines: Vec<&str> = block.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("Appnp(crate::nn::appnp::AppnpConfig),")),
        "{lines:?}"
    );
    let list = src
        .split("architectures! {\n")
        .nth(1)
        .and_then(|b| b.split("\n}").next())
        .expect("the architectures! list");
    for pair in lines.windows(2) {
        let both = format!("{}\n{}", pair[0], pair[1]);
        assert!(
            list.contains(&both),
            "not in the architectures! list:\n{both}"
        );
    }
}
