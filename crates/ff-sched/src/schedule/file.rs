//! A generation graph as a file: [`Graph::to_json`] writes what `plan --graph` writes, and
//! [`Graph::from_json`] reads it back through [`GraphBuilder`], so a hand-written or edited graph
//! is checked as a built one is (every read published by an earlier node, nothing published
//! twice, sources earlier than their nodes) and its ids, timesteps, dependencies and banks are
//! derived again rather than trusted.

use serde::Deserialize;

use super::{Graph, GraphBuilder, KvKey, NodeId, NodeKind, NodeSpec, Unit};
use crate::contract::{Contract, ContractConfig};
use crate::error::{Result, SchedError};

/// The parts of a graph file that describe it; everything else is derived.
#[derive(Deserialize)]
struct GraphFile {
    schedule: String,
    contract: ContractFile,
    nodes: Vec<NodeFile>,
}

#[derive(Deserialize)]
struct ContractFile {
    config: ContractConfig,
}

#[derive(Deserialize)]
struct NodeFile {
    id: Option<NodeId>,
    kind: NodeKind,
    unit: Unit,
    stage: usize,
    level: usize,
    positions: Vec<usize>,
    source: Option<NodeId>,
    reads: Vec<KvKey>,
    publishes: Vec<KvKey>,
    output: bool,
}

impl Graph {
    /// The graph as JSON (contract, nodes with reads, publishes and dependencies).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a graph serialises")
    }

    /// Reads a graph written by [`Graph::to_json`] (see the module docs). Errors name the node.
    pub fn from_json(text: &str) -> Result<Self> {
        let file: GraphFile = serde_json::from_str(text).map_err(|e| SchedError::Graph(format!("not a graph file: {e}")))?;
        let contract = Contract::new(file.contract.config)?;
        let mut builder = GraphBuilder::new(&contract);
        for (index, node) in file.nodes.into_iter().enumerate() {
            if node.id.is_some_and(|id| id != index) {
                return Err(SchedError::Graph(format!("node {index} has id {:?}: nodes must be listed in id order", node.id)));
            }
            if node.source.is_some_and(|source| source >= index) {
                return Err(SchedError::Graph(format!("node {index}: its source {:?} is not an earlier node", node.source)));
            }
            let spec = NodeSpec {
                kind: node.kind,
                unit: node.unit,
                stage: node.stage,
                level: node.level,
                positions: node.positions,
                source: node.source,
                reads: node.reads,
                publishes: node.publishes,
                output: node.output,
            };
            builder.push(spec)?;
        }
        Ok(builder.finish(file.schedule))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Contract, ContractConfig, Graph, ScheduleKind};

    #[test]
    fn every_schedule_round_trips_through_its_file() {
        let contract = Contract::new(ContractConfig::new(21)).unwrap();
        for kind in [ScheduleKind::FlashForward, ScheduleKind::SelfForcing, ScheduleKind::Hiar, ScheduleKind::Bidirectional] {
            let graph = kind.build(&contract).unwrap();
            let read = Graph::from_json(&graph.to_json()).unwrap();
            assert_eq!(read.nodes, graph.nodes, "{kind}");
            assert_eq!((read.history_banks, read.history_capacity), (graph.history_banks, graph.history_capacity));
        }
    }

    #[test]
    fn a_graph_that_reads_what_nobody_published_is_refused_by_node() {
        let graph = ScheduleKind::FlashForward.build(&Contract::new(ContractConfig::new(21)).unwrap()).unwrap();
        let mut json: serde_json::Value = serde_json::from_str(&graph.to_json()).unwrap();
        let publisher = graph.nodes.iter().position(|n| !n.publishes.is_empty()).unwrap();
        json["nodes"][publisher]["publishes"] = serde_json::json!([]);
        let err = Graph::from_json(&json.to_string()).unwrap_err().to_string();
        assert!(err.contains("reads") && err.contains("which no earlier node publishes"), "{err}");
        assert!(Graph::from_json("{}").unwrap_err().to_string().contains("not a graph file"));
    }
}
