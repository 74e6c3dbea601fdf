//! A topology the server refuses: a `queue.declare` answered with a limit configured
//! on the server (a vhost's `max-queues`, a policy's or the node's queue limit) is the
//! cell's result, REFUSED, with the server's words; not an internal error.

use crate::error::BrokerError;

/// What the adapter adds after the server's answer (a hint for the other cause of
/// PRECONDITION_FAILED, an existing queue of another type); not the server's words.
const HINT: &str = " (an existing queue of another type?";

/// `e` as a [`BrokerError::TopologyRefused`] when it is a queue declaration the server
/// refused because a limit was reached; unchanged otherwise.
pub(super) fn topology_refusal(e: BrokerError) -> BrokerError {
    let BrokerError::Refused(text) = &e else {
        return e;
    };
    let Some(at) = text.find("PRECONDITION_FAILED - ") else {
        return e;
    };
    let answer = text[at..].split(HINT).next().unwrap_or(&text[at..]).trim();
    if !(answer.contains("cannot declare queue") && answer.contains("limit")) {
        return e;
    }
    BrokerError::TopologyRefused {
        what: "declaring the cell's queues (queue.declare, durable)".into(),
        answer: answer.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_limit_on_queue_declare_is_a_refusal() {
        let limit = BrokerError::Refused("cb.x.l8: queue.declare: protocol error: AMQP soft error: PRECONDITION-FAILED: PRECONDITION_FAILED - cannot declare queue 'cb.x.l8': queue limit in vhost 'v' (5) is reached (an existing queue of another type? keep reset on; queue_type=classic)".into());
        match topology_refusal(limit) {
            BrokerError::TopologyRefused { answer, .. } => assert_eq!(
                answer,
                "PRECONDITION_FAILED - cannot declare queue 'cb.x.l8': queue limit in vhost 'v' (5) is reached"
            ),
            e => panic!("{e:?}"),
        }
        let inequivalent = BrokerError::Refused(
            "q: PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q'".into(),
        );
        assert!(matches!(
            topology_refusal(inequivalent),
            BrokerError::Refused(_)
        ));
        let conn = BrokerError::Connection("queue limit".into());
        assert!(matches!(topology_refusal(conn), BrokerError::Connection(_)));
    }
}
