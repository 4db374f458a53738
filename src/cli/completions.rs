//! Shell completions from the table. [to be written]
