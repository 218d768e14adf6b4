//! DropEdge (Rong et al., ICLR 2020): a random subgraph each epoch, renormalised.
