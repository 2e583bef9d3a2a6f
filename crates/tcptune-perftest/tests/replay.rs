//! A test recorded as `tcptune test --json` prints it, judged again from the document alone
//! (`replay::replay`): the same diagnosis as recorded, stream by stream and direction by
//! direction, for every direction and with parallel streams.

use tcptune_iperf3::{Direction, Params};
use tcptune_perftest::client;
use tcptune_perftest::replay::{replay, ReplayError};
use tcptune_perftest::server::ServerConfig;

mod common;
use common::{cfg, start_server};

#[test]
fn a_fresh_recording_replays_to_the_recorded_diagnosis() {
    let (addr, _stop, _h, _) = start_server(ServerConfig {
        max_tests: 3,
        ..ServerConfig::default()
    });
    for (direction, parallel) in [
        (Direction::Forward, 1),
        (Direction::Reverse, 2),
        (Direction::Bidirectional, 2),
    ] {
        let params = Params {
            direction,
            parallel,
            time_s: 1,
            client_version: Some("tcptune".into()),
            ..Params::default()
        };
        let out = client::run(&cfg(addr, params), &mut |_, _| {}).unwrap();
        // As printed (inside the --json envelope), then read back.
        let doc = serde_json::json!({ "result": out });
        let recorded = &doc["result"]["tcptune"]["diagnosis"];
        assert!(recorded["context"].is_object(), "{direction:?}: no context");
        let again = replay(&doc).unwrap();
        assert_eq!(again.limit, out.tcptune.diagnosis.limit, "{direction:?}");
        assert_eq!(
            again.verdict, out.tcptune.diagnosis.verdict,
            "{direction:?}"
        );
        for (a, b) in again.streams.iter().zip(&out.tcptune.diagnosis.streams) {
            assert_eq!(
                (a.limit, &a.verdict, &a.recommendations),
                (b.limit, &b.verdict, &b.recommendations)
            );
        }
        // Everything recorded, number for number.
        assert_eq!(
            &serde_json::to_value(&again).unwrap(),
            recorded,
            "{direction:?}"
        );
        assert_eq!(
            again.reverse.is_some(),
            direction == Direction::Bidirectional
        );
    }
}

#[test]
fn a_document_without_a_diagnosis_is_refused_with_what_is_missing() {
    let e = replay(&serde_json::json!({"end": {"streams": []}})).unwrap_err();
    assert!(matches!(e, ReplayError::Missing(_)), "{e}");
    assert!(e.to_string().contains("tcptune.streams"), "{e}");
}
