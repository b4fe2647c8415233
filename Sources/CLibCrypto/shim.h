#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
