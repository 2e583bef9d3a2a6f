//! Tests of 1 Gbit/s × 16 ms behind a 1000-packet queue (the bench's dc-10g path), as the
//! bench's searches and side runs measured them: 4 s uploads, the receive buffer 6 MiB,
//! goodput in Mbit/s. CUBIC's are bimodal at either send buffer (a loss that leaves its window
//! below the BDP costs the rest of a test); BBR's are not. The statistics and the sender's
//! tests draw from them.

/// CUBIC with a 4 MiB send buffer (the model's 2 × the BDP).
pub(crate) const CUBIC_4M: [f64; 71] = [
    879.8, 885.0, 879.6, 759.7, 731.2, 881.6, 757.7, 844.3, 870.2, 877.1, 871.9, 753.0, 885.4,
    879.3, 881.9, 875.0, 880.5, 879.0, 872.9, 756.4, 877.3, 776.9, 879.0, 805.0, 767.9, 739.2,
    878.9, 764.0, 793.6, 795.2, 817.1, 795.8, 885.1, 840.2, 792.7, 770.5, 752.0, 881.1, 882.1,
    873.0, 745.0, 788.0, 884.0, 883.0, 743.8, 884.8, 900.0, 907.5, 866.3, 867.2, 874.0, 882.8,
    875.6, 739.5, 875.1, 759.2, 892.1, 751.3, 881.5, 874.3, 882.8, 883.8, 710.6, 879.1, 879.7,
    771.7, 866.5, 878.8, 876.6, 879.8, 835.7,
];

/// CUBIC with 8 MiB (the loaded window's need), and 6–16 MiB in side runs.
pub(crate) const CUBIC_8M: [f64; 50] = [
    910.4, 912.4, 878.8, 907.8, 905.6, 886.7, 822.4, 894.8, 907.5, 905.9, 910.5, 919.4, 883.1,
    906.0, 905.8, 867.7, 916.7, 910.9, 908.0, 909.4, 905.9, 886.5, 903.2, 918.0, 911.0, 906.3,
    903.4, 905.7, 914.6, 869.8, 911.6, 910.2, 917.9, 898.4, 882.9, 911.3, 905.4, 915.2, 877.3,
    843.8, 846.5, 744.2, 880.0, 909.8, 893.2, 873.1, 714.7, 651.1, 892.2, 812.3,
];

/// BBR with the 6 MiB send buffer it needs.
pub(crate) const BBR_6M: [f64; 19] = [
    885.1, 896.7, 881.8, 891.1, 897.9, 896.9, 888.0, 899.0, 879.2, 897.9, 886.7, 889.4, 885.7,
    901.5, 890.7, 886.6, 872.1, 898.7, 889.9,
];
