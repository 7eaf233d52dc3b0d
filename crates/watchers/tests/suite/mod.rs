mod create;
mod fire;
mod reactions;
mod restart;
mod support;
