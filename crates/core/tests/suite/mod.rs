mod audit;
mod autonomy;
mod confirmations;
mod crash;
mod runtimes;
mod services;
mod support;
