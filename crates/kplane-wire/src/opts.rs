//! How INT is recognised in a packet. Nothing in INT is standardised to a port or code point
//! ("user configurable"), so every detector is configurable; defaults follow FORMATS.md §7.

/// A DSCP value that marks INT, compared under `mask` (`dscp & mask == value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DscpMatch {
    pub value: u8,
    pub mask: u8,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeOptions {
    /// UDP destination ports carrying Telemetry Reports. Empty: auto-detect on any port
    /// (a report on a well-known report port must decode; elsewhere a failed try means
    /// "not a report").
    pub report_ports: Vec<u16>,
    /// L4 destination ports announcing INT after the TCP/UDP header (shim follows).
    pub int_l4_ports: Vec<u16>,
    /// DSCP values announcing INT after the TCP/UDP header.
    pub int_dscp: Vec<DscpMatch>,
    /// The KDN paper's INT port (UDP); `None` disables KDN detection.
    pub kdn_port: Option<u16>,
    pub vxlan_port: u16,
    pub vxlan_gpe_port: u16,
    pub geneve_port: u16,
    /// Geneve option class carrying INT (its option type is the INT header type).
    pub geneve_int_class: u16,
    /// GRE protocol type announcing the INT v2 GRE shim.
    pub gre_int_protocol: u16,
    /// VXLAN-GPE next protocol for INT v2.x and for INT v1.0.
    pub gpe_int_next_protocol: u8,
    pub gpe_int_v10_next_protocol: u8,
    /// IP protocol (INT_TYPE) of the INT-label option.
    pub int_label_protocol: u8,
    /// INT-label MAX_hop: INT_num above it marks a specific flow.
    pub int_label_max_hop: u8,
    /// IP protocol carrying GPINT probes (which DSCP 0x17/0x19/0x21 then classify).
    pub gpint_protocol: u8,
}

/// Ports on which any UDP datagram is taken to be a Telemetry Report (FORMATS.md §7).
pub const WELL_KNOWN_REPORT_PORTS: [u16; 5] = [32766, 1234, 5900, 54321, 8090];

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            report_ports: Vec::new(),
            int_l4_ports: vec![0x4568],
            int_dscp: vec![
                DscpMatch {
                    value: 0x17,
                    mask: 0x3F,
                },
                DscpMatch {
                    value: 0x20,
                    mask: 0x3F,
                },
            ],
            kdn_port: None,
            vxlan_port: 4789,
            vxlan_gpe_port: 4790,
            geneve_port: 6081,
            geneve_int_class: 0x0103,
            gre_int_protocol: 0x4569,
            gpe_int_next_protocol: 0x82,
            gpe_int_v10_next_protocol: 0x08,
            int_label_protocol: 253,
            int_label_max_hop: 5,
            gpint_protocol: 254,
        }
    }
}

impl DecodeOptions {
    pub fn dscp_marks_int(&self, dscp: u8) -> bool {
        self.int_dscp.iter().any(|m| dscp & m.mask == m.value)
    }

    /// Whether a UDP datagram to `port` is taken to be a report (and must decode as one).
    pub fn is_report_port(&self, port: u16) -> bool {
        if self.report_ports.is_empty() {
            WELL_KNOWN_REPORT_PORTS.contains(&port)
        } else {
            self.report_ports.contains(&port)
        }
    }
}
