//! The XDP program that steers telemetry to the AF_XDP sockets, as eBPF instructions:
//!
//! ```text
//! untagged Ethernet → IPv4 without options and not a fragment, or IPv6 with UDP next
//!   → UDP destination port is one of the collector's → frame fits an AF_XDP frame
//!   → bpf_redirect_map(xsks, rx_queue_index, XDP_PASS)
//! anything else → XDP_PASS (the kernel's stack, where the collector's UDP socket on the
//!   same port still receives it: fragments, IP options, oversize reports)
//! ```
//!
//! The `XDP_PASS` flag of `bpf_redirect_map` (kernel ≥ 5.3) hands a frame to the kernel when
//! its queue has no socket in the map, so nothing is dropped by the steering itself.

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

// Opcodes (linux/bpf.h, linux/bpf_common.h).
const LDX_W: u8 = 0x61;
const LDX_H: u8 = 0x69;
const LDX_B: u8 = 0x71;
const MOV64_X: u8 = 0xbf;
const MOV64_K: u8 = 0xb7;
const ADD64_K: u8 = 0x07;
const AND64_K: u8 = 0x57;
const JGT_X: u8 = 0x2d;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JA: u8 = 0x05;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
const LD_IMM64: u8 = 0x18;
const PSEUDO_MAP_FD: u8 = 1;

const FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;

const ETH_HLEN: i32 = 14;
const IPV4_UDP_END: i32 = ETH_HLEN + 20 + 8;
const IPV6_UDP_END: i32 = ETH_HLEN + 40 + 8;

/// A 16-bit value as a little-endian load of its network-order bytes reads it.
const fn be16(v: u16) -> i32 {
    v.swap_bytes() as i32
}

/// Where a jump goes, resolved once the program is laid out.
#[derive(Clone, Copy)]
enum Label {
    Pass,
    Ipv6,
    Port,
    Redirect,
}

/// Builds the steering program for `ports` (UDP destination ports) and the largest frame an
/// AF_XDP frame holds, using the XSKMAP `map_fd`.
pub fn steering(ports: &[u16], max_frame: u16, map_fd: i32) -> Vec<Insn> {
    let mut p = Program::default();
    // r6 = ctx; r2 = data; r3 = data_end
    p.op(insn(MOV64_X, 6, 1, 0, 0));
    p.op(insn(LDX_W, 2, 1, 0, 0));
    p.op(insn(LDX_W, 3, 1, 4, 0));
    // Frames larger than an AF_XDP frame go to the kernel: if data + max < data_end.
    p.op(insn(MOV64_X, 4, 2, 0, 0));
    p.op(insn(ADD64_K, 4, 0, 0, i32::from(max_frame)));
    p.jump(insn(JGT_X, 3, 4, 0, 0), Label::Pass);
    // IPv4: Ethernet + 20-byte header + UDP header present.
    p.op(insn(MOV64_X, 4, 2, 0, 0));
    p.op(insn(ADD64_K, 4, 0, 0, IPV4_UDP_END));
    p.jump(insn(JGT_X, 4, 3, 0, 0), Label::Pass);
    p.op(insn(LDX_H, 5, 2, 12, 0));
    p.jump(insn(JNE_K, 5, 0, 0, be16(0x0800)), Label::Ipv6);
    p.op(insn(LDX_B, 5, 2, ETH_HLEN as i16, 0));
    p.jump(insn(JNE_K, 5, 0, 0, 0x45), Label::Pass);
    p.op(insn(LDX_B, 5, 2, (ETH_HLEN + 9) as i16, 0));
    p.jump(insn(JNE_K, 5, 0, 0, 17), Label::Pass);
    // More-fragments flag or a fragment offset: the kernel reassembles.
    p.op(insn(LDX_H, 5, 2, (ETH_HLEN + 6) as i16, 0));
    p.op(insn(AND64_K, 5, 0, 0, be16(0x3fff)));
    p.jump(insn(JNE_K, 5, 0, 0, 0), Label::Pass);
    p.op(insn(LDX_H, 5, 2, (ETH_HLEN + 20 + 2) as i16, 0));
    p.jump(insn(JA, 0, 0, 0, 0), Label::Port);
    // IPv6 with UDP as the first next header.
    p.place(Label::Ipv6);
    p.jump(insn(JNE_K, 5, 0, 0, be16(0x86dd)), Label::Pass);
    p.op(insn(MOV64_X, 4, 2, 0, 0));
    p.op(insn(ADD64_K, 4, 0, 0, IPV6_UDP_END));
    p.jump(insn(JGT_X, 4, 3, 0, 0), Label::Pass);
    p.op(insn(LDX_B, 5, 2, (ETH_HLEN + 6) as i16, 0));
    p.jump(insn(JNE_K, 5, 0, 0, 17), Label::Pass);
    p.op(insn(LDX_H, 5, 2, (ETH_HLEN + 40 + 2) as i16, 0));
    // r5 = UDP destination port (network order as loaded).
    p.place(Label::Port);
    for &port in ports {
        p.jump(insn(JEQ_K, 5, 0, 0, be16(port)), Label::Redirect);
    }
    p.jump(insn(JA, 0, 0, 0, 0), Label::Pass);
    p.place(Label::Redirect);
    p.op(insn(LDX_W, 2, 6, 16, 0)); // rx_queue_index
    p.op(insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd));
    p.op(insn(0, 0, 0, 0, 0));
    p.op(insn(MOV64_K, 3, 0, 0, XDP_PASS));
    p.op(insn(CALL, 0, 0, 0, FUNC_REDIRECT_MAP));
    p.op(insn(EXIT, 0, 0, 0, 0));
    p.place(Label::Pass);
    p.op(insn(MOV64_K, 0, 0, 0, XDP_PASS));
    p.op(insn(EXIT, 0, 0, 0, 0));
    p.finish()
}

#[derive(Default)]
struct Program {
    insns: Vec<Insn>,
    /// (instruction index, target) of every jump.
    jumps: Vec<(usize, Label)>,
    /// Instruction index of each placed label.
    placed: Vec<(Label, usize)>,
}

impl Program {
    fn op(&mut self, i: Insn) {
        self.insns.push(i);
    }
    fn jump(&mut self, i: Insn, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.insns.push(i);
    }
    fn place(&mut self, l: Label) {
        self.placed.push((l, self.insns.len()));
    }
    fn finish(mut self) -> Vec<Insn> {
        for &(at, to) in &self.jumps {
            let target = self
                .placed
                .iter()
                .find(|(l, _)| std::mem::discriminant(l) == std::mem::discriminant(&to))
                .map(|&(_, i)| i)
                .expect("every label is placed");
            self.insns[at].off = (target as isize - at as isize - 1) as i16;
        }
        self.insns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_inside_the_program_and_it_ends_in_exit() {
        let p = steering(&[32766, 9555], 3840, 7);
        assert_eq!(p.last().map(|i| i.code), Some(EXIT));
        for (at, i) in p.iter().enumerate() {
            if matches!(i.code, JGT_X | JEQ_K | JNE_K | JA) {
                let to = at as isize + 1 + i.off as isize;
                assert!(to > at as isize && (to as usize) < p.len(), "jump at {at}");
            }
        }
        // One comparison per port, with the port in network byte order.
        let cmp: Vec<i32> = p
            .iter()
            .filter(|i| i.code == JEQ_K)
            .map(|i| i.imm)
            .collect();
        assert_eq!(cmp, vec![be16(32766), be16(9555)]);
        // The map's descriptor sits in the 64-bit load.
        assert!(p.iter().any(|i| i.code == LD_IMM64 && i.imm == 7));
    }
}
