mod autonomy;
mod digest;
mod layers;
mod matrix;
mod regression;
mod standing;
mod support;
