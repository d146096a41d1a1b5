#include <stdlib.h>
#include <string.h>
#include <stdio.h>
int main(int c,char**v){ size_t gb=atol(v[1]); for(size_t i=0;i<gb;i++){ char*p=malloc(1UL<<30); memset(p,1,1UL<<30); } puts("ok"); return 0;}
