pub trait Transport {}
