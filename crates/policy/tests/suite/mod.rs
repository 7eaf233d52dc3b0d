mod autonomy;
mod digest;
mod layers;
mod matrix;
mod standing;
mod support;
