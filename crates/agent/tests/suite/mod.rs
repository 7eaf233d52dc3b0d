mod background;
mod continuity;
mod failures;
mod injection;
mod regressions;
mod support;
mod tools;
