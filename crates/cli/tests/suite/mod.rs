mod audit;
mod protocol;
mod support;
