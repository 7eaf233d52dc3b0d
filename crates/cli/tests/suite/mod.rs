mod audit;
mod daemon;
mod protocol;
mod support;
