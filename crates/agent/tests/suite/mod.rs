mod background;
mod continuity;
mod failures;
mod injection;
mod judge;
mod regressions;
mod support;
mod tools;
