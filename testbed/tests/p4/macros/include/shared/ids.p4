// The ids a controller of this program was written against, as production programs keep them.
#ifndef IDS_P4
#define IDS_P4
#define FWD_TABLE_ID 0x02000001
#define FWD_ACTION_ID 0x01000007
#define DROP_ACTION_ID 8
#define HITS_COUNTER_ID 0x12000042
#endif
