//! Oversmoothing metrics over node representations.
