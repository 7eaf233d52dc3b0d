mod binary;
