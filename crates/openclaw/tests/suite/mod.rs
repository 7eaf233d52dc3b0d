mod config;
mod fake_gateway;
mod identity;
mod stream;
mod surface;
