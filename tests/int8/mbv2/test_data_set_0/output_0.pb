
BoutputJ(8¸qANMBÚBÚšA1SBIƒ1Â¦.¦À¿0„AÈÔoBNMÂ