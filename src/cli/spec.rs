//! The verb and flag table (spec 07). [to be written]
