//! Thread-safe counterparts of the single-threaded pointers (see the sync issue).
