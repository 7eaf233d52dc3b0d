mod protocol;
mod support;
