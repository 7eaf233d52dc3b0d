mod connect;
mod screen;
mod support;
mod xml;
