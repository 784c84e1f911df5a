//! `p4/build/` is what p4c makes of `p4/kplane_int.p4` today: the program compiles for BMv2,
//! and the committed P4Info and BMv2 configuration are not stale. Needs p4c
//! (`../shared/p4-toolchain/install.sh`); skipped without it unless `KPLANE_REQUIRE_P4=1`
//! (CI), where a missing p4c fails.

use std::path::Path;
use std::process::Command;

fn p4c_available() -> bool {
    let found = Command::new("p4c").arg("--version").output().is_ok();
    if !found {
        assert!(
            std::env::var("KPLANE_REQUIRE_P4").as_deref() != Ok("1"),
            "KPLANE_REQUIRE_P4=1 but p4c is not installed"
        );
        eprintln!("p4c not installed: skipping (../shared/p4-toolchain/install.sh)");
    }
    found
}

fn without_program_path(json: &[u8]) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(json).unwrap();
    if let Some(o) = v.as_object_mut() {
        o.remove("program");
    }
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn the_committed_build_is_what_p4c_makes_of_the_program() {
    if !p4c_available() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::env::temp_dir().join(format!("kplane-p4c-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let info_json = out.join("kplane_int.p4info.json");
    let info_bin = out.join("kplane_int.p4info.bin");
    // The same command as `make p4`, from the repository root (the BMv2 JSON records paths).
    let run = Command::new("p4c")
        .current_dir(&root)
        .args([
            "--target", "bmv2", "--arch", "v1model", "--std", "p4-16", "-o",
        ])
        .arg(&out)
        .arg("--p4runtime-files")
        .arg(format!("{},{}", info_json.display(), info_bin.display()))
        .arg("p4/kplane_int.p4")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "p4c rejects p4/kplane_int.p4:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for (fresh, committed) in [
        (info_json, "p4/build/kplane_int.p4info.json"),
        (info_bin, "p4/build/kplane_int.p4info.bin"),
        (out.join("kplane_int.json"), "p4/build/kplane_int.json"),
    ] {
        let (mut a, mut b) = (
            std::fs::read(&fresh).unwrap(),
            std::fs::read(root.join(committed)).unwrap(),
        );
        if committed.ends_with("kplane_int.json") {
            // The BMv2 configuration names p4c's output directory: compare everything else.
            (a, b) = (without_program_path(&a), without_program_path(&b));
        }
        assert!(
            a == b,
            "{committed} is stale: run `make p4` and commit p4/build/"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
