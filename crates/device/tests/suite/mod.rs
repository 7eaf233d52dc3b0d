mod calendar;
mod catalogue;
mod scenario;
mod screenshot;
mod state;
mod support;
mod tasks;
mod ui;
