mod attention;
mod endpoint;
mod support;
