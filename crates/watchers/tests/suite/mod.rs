mod authority;
mod create;
mod fire;
mod owners;
mod reactions;
mod restart;
mod support;
mod wake;
