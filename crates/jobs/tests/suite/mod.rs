mod scheduler;
mod scheduler_control;
mod schema;
mod support;
mod transitions;
mod validation;
