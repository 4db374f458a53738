//! Command-line parsing from the table. [to be written]
