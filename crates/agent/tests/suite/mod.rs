mod continuity;
mod failures;
mod injection;
mod support;
mod tools;
