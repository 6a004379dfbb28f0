//! RoCEv2 traffic generator for the bmv2-lab: spec generation, packet
//! format, DCQCN reaction point, selective acknowledgement, and the
//! per-host runtime.

pub mod dcqcn;
pub mod gen;
pub mod netns;
pub mod packet;
pub mod relay;
pub mod run;
pub mod sack;
pub mod spec;
pub mod sys;
