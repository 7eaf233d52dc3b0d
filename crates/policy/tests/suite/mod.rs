mod autonomy;
mod digest;
mod layers;
mod matrix;
mod profiles;
mod regression;
mod standing;
mod support;
