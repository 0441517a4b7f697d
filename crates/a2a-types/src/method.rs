//! The closed set of A2A 1.0 operations this workspace names: the JSON-RPC `method` and gRPC
//! method names, the `method` label of the gateway's metrics and spans, the keys of rate-limit
//! costs and the operations of the REST route table and the clients. One enum, so the compiler
//! checks those lists together; [`Method::as_str`] is the wire name.

use std::fmt;

/// An A2A 1.0 operation, plus the gateway's `ListAgents` (the agent catalogue, an extension
/// method; it is named here because it is labelled and rate-limited like the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    SendMessage,
    SendStreamingMessage,
    GetTask,
    ListTasks,
    CancelTask,
    SubscribeToTask,
    CreateTaskPushNotificationConfig,
    GetTaskPushNotificationConfig,
    ListTaskPushNotificationConfigs,
    DeleteTaskPushNotificationConfig,
    GetExtendedAgentCard,
    ListAgents,
}

impl Method {
    /// Every method, in declaration order (the order of metric label tables).
    pub const ALL: [Method; 12] = [
        Method::SendMessage,
        Method::SendStreamingMessage,
        Method::GetTask,
        Method::ListTasks,
        Method::CancelTask,
        Method::SubscribeToTask,
        Method::CreateTaskPushNotificationConfig,
        Method::GetTaskPushNotificationConfig,
        Method::ListTaskPushNotificationConfigs,
        Method::DeleteTaskPushNotificationConfig,
        Method::GetExtendedAgentCard,
        Method::ListAgents,
    ];

    /// The wire name (JSON-RPC `method`, the gRPC method, the metric label).
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::SendMessage => "SendMessage",
            Method::SendStreamingMessage => "SendStreamingMessage",
            Method::GetTask => "GetTask",
            Method::ListTasks => "ListTasks",
            Method::CancelTask => "CancelTask",
            Method::SubscribeToTask => "SubscribeToTask",
            Method::CreateTaskPushNotificationConfig => "CreateTaskPushNotificationConfig",
            Method::GetTaskPushNotificationConfig => "GetTaskPushNotificationConfig",
            Method::ListTaskPushNotificationConfigs => "ListTaskPushNotificationConfigs",
            Method::DeleteTaskPushNotificationConfig => "DeleteTaskPushNotificationConfig",
            Method::GetExtendedAgentCard => "GetExtendedAgentCard",
            Method::ListAgents => "ListAgents",
        }
    }

    /// The method with wire name `name` (exact, case-sensitive), if it is one.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// The position of this method in [`Method::ALL`] (for per-method tables).
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_index_the_table() {
        for (i, m) in Method::ALL.into_iter().enumerate() {
            assert_eq!(Method::from_name(m.as_str()), Some(m));
            assert_eq!(m.index(), i, "{m}");
            assert_eq!(m.to_string(), m.as_str());
        }
        assert_eq!(Method::from_name("sendMessage"), None);
        assert_eq!(
            Method::from_name("message/send"),
            None,
            "0.3 names are not 1.0 methods"
        );
    }
}
