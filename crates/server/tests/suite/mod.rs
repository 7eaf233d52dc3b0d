mod endpoint;
mod support;
