//! Help text from the table. [to be written]
