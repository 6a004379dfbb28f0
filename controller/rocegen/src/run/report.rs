//! What a run records and prints: the connections' rates sampled to
//! `rate-<host>.csv`, a progress line a second, every flow's outcome in
//! `flows-<host>.csv`, and the summary.

use std::fs::File;
use std::io::{BufWriter, Write};

use anyhow::{Context, Result};

use super::host::Host;
use super::opts::Outcome;

impl Host {
    pub(super) fn sample_rates(&mut self, now: u64) -> Result<()> {
        for c in &mut self.send {
            if c.released == 0 || c.done() {
                continue;
            }
            c.rp.advance(now);
            let mi = c.msg_of(c.una);
            let id = &self.spec.flows[c.msgs[mi].flow].id;
            writeln!(
                self.rate_csv,
                "{now},{id},{:.3},{:.6},{:.3}",
                c.rp.rate(),
                c.rp.alpha(),
                c.rp.target()
            )?;
        }
        Ok(())
    }

    pub(super) fn progress(&self, now: u64) {
        let payload = u64::from(self.spec.payload_bytes);
        let (mut sd, mut st, mut rd, mut rt) = (0u64, 0u64, 0u64, 0u64);
        for c in &self.send {
            for m in &c.msgs {
                let b = self.spec.flows[m.flow].bytes;
                st += b;
                let acked = c.una.clamp(m.first_seq, m.end_seq()) - m.first_seq;
                sd += (acked * payload).min(b);
            }
        }
        for c in &self.recv {
            for m in &c.msgs {
                let b = self.spec.flows[m.flow].bytes;
                rt += b;
                let got = c.win.expected().clamp(m.first_seq, m.first_seq + m.npkts) - m.first_seq;
                rd += (got * payload).min(b);
            }
        }
        let secs = now.saturating_sub(self.spec.start_unix_ns) as f64 / 1e9;
        eprintln!(
            "rocegen {} +{secs:.1}s: sent+acked {sd}/{st} B, received {rd}/{rt} B",
            self.opts.host
        );
    }

    pub(super) fn write_flows_csv(&self) -> Result<()> {
        let path = self.opts.out.join(format!("flows-{}.csv", self.opts.host));
        let mut w = BufWriter::new(
            File::create(&path).with_context(|| format!("creating {}", path.display()))?,
        );
        writeln!(
            w,
            "flow,kind,src,dst,src_qp,dest_qp,bytes,role,ready_ns,start_ns,end_ns,fct_ns,\
             packets,retransmits,ce_marked,cnps,min_rate_pps,complete,\
             nic,wire_bytes,resent_bytes,naks,rewinds,out_of_order,duplicates,placed_bytes"
        )?;
        let nic = self.opts.nic.as_str();
        let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
        let fct = |s: Option<u64>, e: Option<u64>| match (s, e) {
            (Some(s), Some(e)) => e.saturating_sub(s).to_string(),
            _ => String::new(),
        };
        for c in &self.send {
            for m in &c.msgs {
                let f = &self.spec.flows[m.flow];
                writeln!(
                    w,
                    "{},{},{},{},{},{},{},send,{},{},{},{},{},{},,{},{:.3},{},{nic},{},{},{},{},,,",
                    f.id,
                    f.kind.as_str(),
                    f.src,
                    f.dst,
                    f.src_qp,
                    f.dest_qp,
                    f.bytes,
                    opt(m.ready_ns),
                    opt(m.start_ns),
                    opt(m.end_ns),
                    fct(m.start_ns, m.end_ns),
                    m.sent,
                    m.retx,
                    m.cnps,
                    m.min_rate,
                    m.end_ns.is_some(),
                    m.sent_bytes,
                    m.resent_bytes,
                    m.naks,
                    m.rewinds,
                )?;
            }
        }
        for c in &self.recv {
            for m in &c.msgs {
                let f = &self.spec.flows[m.flow];
                writeln!(
                    w,
                    "{},{},{},{},{},{},{},recv,,{},{},{},{},{},{},{},,{},{nic},{},,{},,{},{},{}",
                    f.id,
                    f.kind.as_str(),
                    f.src,
                    f.dst,
                    f.src_qp,
                    f.dest_qp,
                    f.bytes,
                    opt(m.start_ns),
                    opt(m.end_ns),
                    fct(m.start_ns, m.end_ns),
                    m.packets,
                    m.discarded,
                    m.ce,
                    m.cnps,
                    m.end_ns.is_some(),
                    m.wire_bytes,
                    m.naks,
                    m.out_of_order,
                    m.duplicates,
                    m.placed_bytes,
                )?;
            }
        }
        w.flush()?;
        Ok(())
    }

    pub(super) fn summary(&self, o: &Outcome) {
        let sent: u64 = self.send.iter().flat_map(|c| &c.msgs).map(|m| m.sent).sum();
        let retx: u64 = self.send.iter().flat_map(|c| &c.msgs).map(|m| m.retx).sum();
        let cnps_in: u64 = self.send.iter().map(|c| c.rp.cnps()).sum();
        let timeouts: u64 = self.send.iter().map(|c| c.timeouts).sum();
        let probes: u64 = self.send.iter().map(|c| c.probes).sum();
        let send_msgs = || self.send.iter().flat_map(|c| &c.msgs);
        let naks_in: u64 = send_msgs().map(|m| m.naks).sum();
        let rewinds: u64 = send_msgs().map(|m| m.rewinds).sum();
        let resent: u64 = send_msgs().map(|m| m.resent_bytes).sum();
        let recv_msgs = || self.recv.iter().flat_map(|c| &c.msgs);
        let ooo: u64 = recv_msgs().map(|m| m.out_of_order).sum();
        let dups: u64 = recv_msgs().map(|m| m.duplicates).sum();
        let recvd: u64 = self
            .recv
            .iter()
            .flat_map(|c| &c.msgs)
            .map(|m| m.packets)
            .sum();
        let ce: u64 = self.recv.iter().flat_map(|c| &c.msgs).map(|m| m.ce).sum();
        let cnps_out: u64 = self.recv.iter().flat_map(|c| &c.msgs).map(|m| m.cnps).sum();
        let wall = o.wall_ns.max(1) as f64;
        eprintln!(
            "rocegen {} (nic {}): {} in {:.3}s; sent {sent} pkts ({retx} retransmitted, {probes} tail probes, {timeouts} timeouts), \
             NAKs in {naks_in}, rewinds {rewinds}, resent {resent} B; \
             recv {recvd} pkts ({ce} CE, {ooo} out of order, {dups} duplicates), CNPs in {cnps_in} out {cnps_out} ({} on out-of-order), \
             ACKs {} ({} with SACK) NAKs {}, \
             send errors {}, foreign {}, malformed {}, bad ICRC {}; cpu {:.1} ms ({:.1}% of a core)",
            self.opts.host,
            self.opts.nic.as_str(),
            if o.complete { "complete" } else { "INCOMPLETE" },
            wall / 1e9,
            self.ctr.ooo_cnps,
            self.ctr.acks_sent,
            self.ctr.sacks_sent,
            self.ctr.naks_sent,
            self.ctr.send_errors,
            self.ctr.foreign,
            self.ctr.malformed,
            self.ctr.bad_icrc,
            o.cpu_ns as f64 / 1e6,
            100.0 * o.cpu_ns as f64 / wall
        );
    }
}
