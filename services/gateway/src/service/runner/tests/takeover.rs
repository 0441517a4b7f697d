//! Hand-offs: a turn taken over from a replica that died goes on from the task as stored, and a
//! message continuing a task waits for the task's previous turn to finish in this process.
