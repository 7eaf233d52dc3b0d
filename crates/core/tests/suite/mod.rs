mod audit;
mod autonomy;
mod confirmations;
mod crash;
mod regression;
mod runtimes;
mod services;
mod support;
