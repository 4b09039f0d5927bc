//! Fuzz target: the CSV dump reader (both orders, the external sort with spills, the bounded
//! reads) and every offline analysis over what it reads. Seeds: `corpus/csv/` plus any
//! `--corpus DIR` (run.sh adds msMemScope's real dumps when the workspace has them).

use std::io::Read;

use memscope_dump::reader::CsvSource;
use memscope_fuzz::{dumps, run, Target};

const HEADER: &str = "ID,Event,Event Type,Name,Timestamp(ns),Process Id,Thread Id,Device Id,Ptr,Attr,Call Stack(Python),Call Stack(C)\n";

fn seeds() -> Vec<Vec<u8>> {
    let rows = [
        "1,MALLOC,PTA,N/A,100,7,7,0,0x0000000000001000,\"{allocation_id:1,addr:0x1000,size:512,used:512,total:1024,owner:PTA@w}\",,\n",
        "2,OP_LAUNCH,ATEN_START,aten::add,110,7,7,0,N/A,,,\n",
        "3,ACCESS,READ,aten::add,120,7,7,0,0x0000000000001000,\"{allocation_id:1,addr:0x1000,size:24,type:PTA,dtype:torch.float32,shape:torch.Size([2, 3])}\",\"a.py(1): f\nb.py(2): g\n\",\n",
        "4,OP_LAUNCH,ATEN_END,aten::add,130,7,7,0,N/A,,,\n",
        "5,MSTX,Mark,\"\"\"m\"\"\",140,7,7,0,N/A,,,\n",
        "6,KERNEL_LAUNCH,KERNEL_LAUNCH,k,150,7,7,0,N/A,\"{streamId:1,taskId:2}\",,\n",
        "7,MALLOC,HAL,N/A,160,7,7,0,0x0000000000002000,\"{allocation_id:2,addr:0x2000,size:4096,used:4096,page_type:normal,alloc_type:alloc}\",,\n",
        "8,FREE,PTA,N/A,170,7,7,0,0x0000000000001000,\"{allocation_id:1,addr:0x1000,size:512,used:0,total:1024}\",,\n",
        "9,MSTX,Range_start,step start,180,7,7,0,N/A,\"{range_id:1}\",,\n",
        "10,MSTX,Range_end,step start,190,7,7,0,N/A,\"{range_id:1}\",,\n",
        "11,OP_LAUNCH,ATB_START,LinearOperation,200,7,7,0,N/A,\"{path:0_1/x,workspace_ptr:0x10,workspace_size:64}\",,\n",
        "12,SYSTEM,acl init,N/A,210,7,7,N/A,N/A,,,\n",
        // msMemScope's spellings (MINDSPORE, SNAPSHOT keys), mapped memory, timestamps that
        // disagree with IDs (the replay-order warning, `--order time`)
        "13,MALLOC,MINDSPORE,N/A,205,7,8,0,0x0000000000003000,\"{allocation_id:3,addr:0x3000,size:64,owner:MINDSPORE@layer}\",,\n",
        "14,ACCESS,WRITE,op,206,7,8,0,0x0000000000003000,\"{allocation_id:3,addr:0x3000,size:64,type:MINDSPORE}\",,\n",
        "15,SNAPSHOT,SNAPSHOT,OOM_Snapshot,220,7,7,0,N/A,\"{reserved:1,max_reserved:2,allocated:1,max_allocated:1,total:8,free:4,device_rate:50.000000}\",,\n",
        "16,MALLOC,HOST_MMAP,N/A,230,7,7,cpu,0x00007f0000000000,\"{allocation_id:4,addr:0x7f0000000000,size:8192}\",,\n",
        "17,FREE,HOST_MMAP,N/A,240,7,7,cpu,0x00007f0000000000,\"{allocation_id:4,addr:0x7f0000000000,size:4096}\",,\n",
    ];
    let mut all = HEADER.to_owned();
    rows.iter().for_each(|r| all.push_str(r));
    let mut reversed = HEADER.to_owned();
    rows.iter().rev().for_each(|r| reversed.push_str(r));
    // the 2025 format: µs timestamps, decimal Ptr, negative FREE sizes, MID
    let old = format!(
        "{HEADER}1,SYSTEM,acl init,N/A,1746006014162153,2523740,2523740,N/A,N/A,,,\n\
         2,MALLOC,HAL,N/A,1746006014361575,2523740,2523740,0,20615843020800,\"{{addr:20615843020800,size:16384,owner:,MID:7}}\",,\n\
         3,FREE,PTA,N/A,1746006024182194,2523740,2523740,1,20623381625344,\"{{addr:20623381625344,size:-512,owner:,total:2097152,used:3537408}}\",,\n"
    );
    let torn = format!("{all}13,MALLOC,PTA,N/A,2");
    vec![
        all.into_bytes(),
        reversed.into_bytes(),
        old.into_bytes(),
        torn.into_bytes(),
        HEADER.as_bytes().to_vec(),
        b"\xef\xbb\xbfID,Event,Event Type,Name,Timestamp(us),Process Id,Thread Id,Device Id,Ptr,Attr\r\n1,MSTX,Mark,m,1,1,1,0,N/A,\r\n".to_vec(),
    ]
}

fn dict() -> Vec<Vec<u8>> {
    [
        "MALLOC",
        "FREE",
        "ACCESS",
        "OP_LAUNCH",
        "KERNEL_LAUNCH",
        "MSTX",
        "SYSTEM",
        "PTA",
        "HAL",
        "ATB",
        "MINDSPORE",
        "MINDSPORE@",
        "type:",
        "HOST_MMAP",
        "SNAPSHOT",
        "max_reserved:",
        "total_mem:",
        "device_rate:",
        "READ",
        "WRITE",
        "ATEN_START",
        "ATEN_END",
        "ATB_START",
        "ATB_END",
        "Mark",
        "Range_start",
        "Range_end",
        "N/A",
        "cpu",
        "host",
        "size:",
        "addr:",
        "allocation_id:",
        "owner:",
        "used:",
        "total:",
        "MID:",
        "inefficient_type:",
        "{\"size\":\"",
        "\"{",
        "}\"",
        "\"\"",
        ",,",
        ",\"",
        "\",",
        "\r\n",
        "\n",
        "0x",
        "{",
        "}",
        "@",
        "step start",
        "[[[[[[[[",
        "Timestamp(us)",
        "\u{feff}",
        "\u{1b}]0;x\u{7}",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn main() {
    run(
        Target {
            name: "csv",
            ext: "csv",
            seeds: seeds(),
            dict: dict(),
            stretch_max: 96 << 20,
        },
        |input, ctx| {
            // now and then: the input repeated without end (a /proc file, a pipe that never
            // closes): the header and each record must still end, within their bounds
            if ctx.rng.one_in(256) && !input.is_empty() {
                let endless = Cycle(input, 0);
                if let Ok(mut src) = CsvSource::new("endless", endless, None) {
                    for _ in 0..3 {
                        if !matches!(src.next_record(), Ok(true)) {
                            break;
                        }
                    }
                }
            }
            dumps::run_dump(&ctx.path.clone(), ctx)
        },
    )
}

/// `input` over and over.
struct Cycle<'a>(&'a [u8], usize);

impl Read for Cycle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            let k = (self.0.len() - self.1).min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&self.0[self.1..self.1 + k]);
            n += k;
            self.1 = (self.1 + k) % self.0.len();
        }
        Ok(n)
    }
}
