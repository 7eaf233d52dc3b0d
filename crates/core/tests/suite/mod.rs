mod audit;
mod autonomy;
mod confirmations;
mod crash;
mod services;
mod support;
