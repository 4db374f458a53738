//! Man page generation from the table. [to be written]
