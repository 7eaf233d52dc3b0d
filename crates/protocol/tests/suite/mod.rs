mod canonical;
mod catalogue;
mod params;
mod rules;
mod support;
mod upstream;
