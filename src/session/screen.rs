//! Screen model and terminal capability responder (spec 04 §1). [to be written]
