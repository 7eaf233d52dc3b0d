mod planted;
mod real;
