//! svm: the facade applications depend on.
