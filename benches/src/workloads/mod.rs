//! The workloads, each written once against [`Heap`](crate::heap::Heap) or
//! [`SyncHeap`](crate::heap::SyncHeap).

pub mod binary_trees;
pub mod churn;
pub mod cycle_churn;
pub mod hub;
pub mod linked_list;
pub mod micro;
pub mod parent_trees;
pub mod random_ops;
pub mod stress;
pub mod threaded;
