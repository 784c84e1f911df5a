//! GPINT probes feed the same analytics as INT: returned probes as `kplane probe` reports them
//! to the collector (an Inner-Only Telemetry Report v2.0 carrying the probe), decoded by the
//! collector's decoder, through the window analytics — the probe's switches are a trajectory
//! in `flows` and each switch's DLV queue depth a sample in `queues`.

use arrow_array::RecordBatch;
use kplane_bus::PartitionEvent;
use kplane_bus::topics;
use kplane_model::batch::ReportBatchBuilder;
use kplane_stream_processor::Config;
use kplane_stream_processor::metrics::ProcessorMetrics;
use kplane_stream_processor::processor::Processor;
use kplane_stream_processor::query::sql_blocking;
use kplane_wire::build::{ip_packet, report_v20_ipv4};
use kplane_wire::papers::{DlvHeader, GpintProbe, ProbeKind};
use kplane_wire::{DecodeOptions, Decoder, RecordMeta};

const S: u64 = 1_000_000_000;

/// A probe back from switches 3, 2, 1 (1 first on the path, 3 sent it to the monitor) with
/// the queue depths `depths` (path order), reported at `t`.
fn probe_report(t: u64, request: u16, depths: [u8; 3]) -> (Vec<u8>, RecordMeta) {
    let dlv = |switch_id, queue_depth| {
        (
            DlvHeader {
                switch_id,
                queue_depth,
                measurement_count: 1,
            },
            vec![u32::from(request)],
        )
    };
    let mut body = Vec::new();
    // Newest first on the wire.
    let devices = [dlv(3, depths[2]), dlv(2, depths[1]), dlv(1, depths[0])];
    GpintProbe::write(request, 0, &[], &devices, &mut body);
    let monitor = "10.255.0.1".parse().unwrap();
    let ip = ip_packet(monitor, monitor, 254, ProbeKind::DSCP_MEASUREMENT, &body);
    let meta = RecordMeta {
        exporter: Some("127.0.0.1:40000".parse().unwrap()),
        received_ns: t,
    };
    (report_v20_ipv4(3, u32::from(request), &ip), meta)
}

fn reports() -> RecordBatch {
    let mut decoder = Decoder::new(DecodeOptions::default());
    let mut builder = ReportBatchBuilder::new(4);
    for (t, request, depths) in [
        (10 * S, 1, [0, 40, 2]),
        (10 * S + S / 2, 2, [0, 60, 4]),
        (11 * S + S / 2, 3, [0, 10, 0]),
    ] {
        let (payload, meta) = probe_report(t, request, depths);
        let outcome = decoder.decode_report(&payload, meta, |r| builder.append(r).unwrap());
        assert_eq!((outcome.records, outcome.error), (1, None));
    }
    builder.finish().unwrap()
}

fn column_u64(batches: &[RecordBatch], sql_col: usize) -> Vec<u64> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::UInt64Type;
    batches
        .iter()
        .flat_map(|b| {
            let c = datafusion::arrow::compute::cast(
                b.column(sql_col),
                &datafusion::arrow::datatypes::DataType::UInt64,
            )
            .unwrap();
            c.as_primitive::<UInt64Type>().values().to_vec()
        })
        .collect()
}

#[test]
fn probes_become_trajectories_and_queue_samples() {
    let data = std::env::temp_dir().join(format!("kplane-sp-probes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let cfg = Config {
        data_dir: data.clone(),
        publish: false,
        ..Config::default()
    };
    let mut p = Processor::new(cfg, ProcessorMetrics::default(), None).unwrap();
    let r = (topics::REPORTS.to_string(), 0u32);
    p.rebalance(vec![PartitionEvent::Assigned(vec![r.clone()])])
        .unwrap();
    p.offer_batches(&r, 0, &[reports()]);
    p.flush().unwrap();

    let flows = sql_blocking(
        &data,
        "SELECT CAST(CAST(window_start AS BIGINT) / 1000000000 AS BIGINT UNSIGNED), reports, \
           array_to_string(path, '-') FROM flows WHERE protocol = 254 ORDER BY window_start",
    )
    .unwrap();
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&flows)
        .unwrap()
        .to_string();
    assert_eq!(column_u64(&flows, 0), [10, 11], "{text}");
    assert_eq!(column_u64(&flows, 1), [2, 1], "{text}");
    assert!(
        text.contains("1-2-3"),
        "the probe's switches in path order: {text}"
    );

    let queues = sql_blocking(
        &data,
        "SELECT node_id, samples, occupancy_max FROM queues \
         WHERE CAST(window_start AS BIGINT) = 10000000000 ORDER BY node_id",
    )
    .unwrap();
    assert_eq!(column_u64(&queues, 0), [1, 2, 3]);
    assert_eq!(column_u64(&queues, 1), [2, 2, 2]);
    assert_eq!(
        column_u64(&queues, 2),
        [0, 60, 4],
        "each switch's deepest DLV queue"
    );
    std::fs::remove_dir_all(&data).unwrap();
}
